"""``python -m trainer_core train ...`` and ``python -m trainer_core chat RUN ...``: see ``trainer_core.cli``."""

import sys

from trainer_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
