"""The style a browser gives each element of a token strip's HTML, resolved without a browser.

Enough CSS for `figures.token_strip_html`: rules of its <style> blocks whose selector is an
ancestor class then one class or element (`.dllm-token-strip .s0`, `.dllm-token-strip s`) or the
strip's class alone, ordered by specificity then source order, then the element's inline
`style`. So a test can state what a token looks like (its background, its outline) however the
HTML carries it: inline, as before, or through classes.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

Style = dict[str, str]


def declarations(text: str) -> Style:
    """`a:b;c:d` as {a: b, c: d}."""
    pairs = (part.split(":", 1) for part in text.split(";") if part.strip())
    return {name.strip(): value.strip() for name, value in pairs}


class _Strip(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rules: list[tuple[tuple[int, int], int, list[str], Style]] = []
        self.stack: list[tuple[str, set[str], Style]] = []
        self.elements: list[tuple[str, list[set[str]], set[str], Style, dict[str, str]]] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "style":
            self._in_style = True
            return
        classes = set(attributes.get("class", "").split())
        ancestors = [c for _, c, _ in self.stack]
        self.elements.append((tag, ancestors, classes, declarations(attributes.get("style", "")), attributes))
        self.stack.append((tag, classes, {}))

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
        elif self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._in_style:
            for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", data):
                parts = selector.split()
                specificity = (sum(p.count(".") for p in parts), sum(not p.startswith(".") for p in parts))
                self.rules.append((specificity, len(self.rules), parts, declarations(body)))


def _matches(part: str, tag: str, classes: set[str]) -> bool:
    return part[1:] in classes if part.startswith(".") else part == tag


def resolved(page: str) -> list[tuple[str, Style, dict[str, str]]]:
    """Every element of `page` (tag, resolved style, attributes), in document order."""
    parser = _Strip()
    parser.feed(page)
    out = []
    for tag, ancestors, classes, inline, attributes in parser.elements:
        style: Style = {}
        for _, _, parts, body in sorted(parser.rules, key=lambda rule: rule[:2]):
            *above, target = parts
            if _matches(target, tag, classes) and all(any(_matches(p, "", c) for c in ancestors) for p in above):
                style.update(body)
        out.append((tag, {**style, **inline}, attributes))
    return out


def token_styles(page: str) -> list[Style]:
    """The resolved style of each token <span> of a strip (legend keys included), in order."""
    return [style for tag, style, _ in resolved(page) if tag == "span"]
