"""Recipe templates render with sizes bounded: each template below took minutes of the interpreter
lock or gigabytes (in the server's own process, for a preview) in Jinja's plain sandbox; ordinary
templates render as before."""

from __future__ import annotations

import pytest
from jinja2.exceptions import SecurityError

from trainer_core.recipes.columns import template
from trainer_core.recipes.sandbox import MAX_TEXT_CHARS

HUGE = [
    "{{ 10**100000000 }}",
    "{{ 2 ** 5000 }}",
    '{{ "x" * 10000000000 }}',
    "{{ [1, 2] * 10000000000 }}",
    '{{ "x"|center(10000000000) }}',
    '{{ "x"|indent(10000000000) }}',
    '{{ "x".ljust(10000000000) }}',
    '{{ "%010000000000d" % 1 }}',
    '{{ "%*d" % (10000000000, 1) }}',
    '{{ "%010000000000d"|format(1) }}',
    '{{ "{:>10000000000}".format(1) }}',
    "{{ range(10000000000)|list|length }}",
    '{% set a = "x" * 1000000 %}{% set a = a ~ a %}{{ a|length }}',
    '{% set a = "x" * 1000000 %}{{ [a, a, a]|join }}',
    '{% set a = "x" * 600000 %}{{ a }}{{ a }}',
]


@pytest.mark.parametrize("text", HUGE)
def test_a_template_that_would_build_too_much_is_refused(text):
    with pytest.raises(SecurityError):
        template(text).render()


def test_ordinary_templates_render_as_before():
    row = {"chunk": "Some text.", "qa": {"question": "Why?", "answer": "Because."}, "n": 3}
    text = "{{ chunk ~ '!' }} {{ qa.question|upper }} {{ '%03d' % n }} {{ '{:>4}'.format(n) }} {{ 2 ** 10 }}"
    assert template(text).render(**row) == "Some text.! WHY? 003    3 1024"
    assert (
        template("{{ ['a', 'b']|join(', ') }} {{ 'ab' * 3 }} {{ range(3)|list }}").render() == "a, b ababab [0, 1, 2]"
    )


def test_the_bound_is_the_text_length():
    assert len(template(f'{{{{ "x" * {MAX_TEXT_CHARS} }}}}').render()) == MAX_TEXT_CHARS
    with pytest.raises(SecurityError, match="at most 1,000,000 characters"):
        template(f'{{{{ "x" * {MAX_TEXT_CHARS + 1} }}}}').render()
