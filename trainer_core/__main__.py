"""``python -m trainer_core train ...``: see ``trainer_core.cli``."""

import sys

from trainer_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
