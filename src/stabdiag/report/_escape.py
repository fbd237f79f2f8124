"""The one escaping policy for text that leaves the program: metric names, run (folder) names, notes and
messages come from the data, and whoever wrote the data may want the report to lie.

Every output kind has its function here, and each starts from `visible`: C0 controls (newlines and tabs
included), DEL, C1 controls and the bidirectional overrides are shown as `\\n`, `\\x1b`, `\\u202e`, so a
name can neither start a line of its own (a forged `::error` or `::stop-commands::` line for the GitHub
runner, which reads stdout and stderr alike), nor move the cursor, set a title or a hyperlink (CSI, OSC),
nor turn text around.  `::` is shown as `:\\x3a` in a name: a report line wrapped inside a long word could
otherwise start with it.  The rest is per kind:

    terminal, stderr   visible text (the terminal report, `signals`, every `warning:`/`error:`/`note` line)
    markdown_code      a code span that no backtick can close early; `|` escaped inside a table
    markdown_text      text in a paragraph or a table cell: HTML and links inert, `|` escaped
    html               visible text with `<`, `>`, `&` and quotes as entities
    xml                text JUnit XML can hold: characters XML 1.0 forbids shown visibly
    github_data/_property   workflow-command values as the Actions runner decodes them

Our own text goes through the same functions (it holds no control characters, so it is unchanged).
"""

from __future__ import annotations

import re

# C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F), the bidi embeddings/overrides/isolates, line and
# paragraph separators and the BOM: nothing a name needs, everything a forger does
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|::")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(match: re.Match) -> str:
    char = match.group()
    if char == "::":
        return ":\\x3a"
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text) -> str:
    """`text` with every control character shown as an escape; ordinary text unchanged."""
    text = str(text)
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def terminal(text) -> str:
    """Text for the terminal report and `stabdiag signals` (rich Text objects, never markup)."""
    return visible(text)


def stderr(text) -> str:
    """Text of a `warning:`, `error:` or `note:` line on stderr."""
    return visible(text)


def html(text) -> str:
    """Text inside HTML (a Markdown summary's `<details>` or `<br>`-joined cell)."""
    # html.escape(quote=True)'s five replacements, in its order; `import html` would load the entity
    # tables every start needs for nothing
    return visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace('"', "&quot;").replace("'", "&#x27;")


_MD_SPECIAL = re.compile(r"([\\`\[\]|])")


def markdown_text(text, *, in_table: bool = True) -> str:
    """Text in a Markdown paragraph, list item or table cell: no HTML tag, image or link can open
    (`<` and `&` as entities, `[`, `]`, backtick and backslash escaped), `|` cannot end a cell."""
    escaped = visible(text).replace("&", "&amp;").replace("<", "&lt;")
    escaped = _MD_SPECIAL.sub(r"\\\1", escaped)
    return escaped if in_table else escaped.replace("\\|", "|")


def markdown_code(text, *, in_table: bool = False) -> str:
    """`text` as a whole Markdown code span (fences included): fenced by one backtick more than its
    longest backtick run, so none inside can close it; inside a table every `|` is escaped (GitHub
    splits cells before it reads code spans)."""
    body = visible(text)
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`"):
        body = f" {body} "             # CommonMark strips one space each side
    if in_table:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"


# XML 1.0 allows TAB, LF, CR, U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF; of the allowed, C1 and
# DEL are shown too (a CI log viewer prints them)
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml(text, *, lines: bool = False) -> str:
    """Text for a JUnit attribute or element: a data value shown as `visible` shows it; with `lines`,
    our own line breaks between such values are kept and only what XML forbids is escaped."""
    if not lines:
        return _XML_ILLEGAL.sub(_shown, visible(text))
    return _XML_ILLEGAL.sub(_shown, str(text))


def github_data(text, *, lines: bool = False) -> str:
    """A workflow command's message: `visible` first (a newline from the data is `\\n`, never a line
    break the runner would decode), then the runner's own escapes.  With `lines`, the text is ours, its
    values already `visible`, and its line breaks go in as %0A."""
    text = str(text) if lines else visible(text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text) -> str:
    """A workflow command's property (file=, title=): also `:` and `,`."""
    return github_data(visible(text)).replace(":", "%3A").replace(",", "%2C")
