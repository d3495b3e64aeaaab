"""The one error the HLO front end raises for bad input."""

from __future__ import annotations


def line_and_column(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of character offset `pos` in `text`."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    line_start = text.rfind("\n", 0, pos) + 1
    return line, pos - line_start + 1


class HloParseError(ValueError):
    """Malformed HLO text.

    **Attributes:**

    - `line`, `column`: 1-based position of the problem in the text.
    - `source`: the file name (or `"<string>"`).
    - `reason`: the problem alone, without position or quoted line.

    `str(error)` gives `source:line:column: reason`, then the offending line
    with a caret under the column (unless the input was no text at all: a
    binary file, a broken gzip file).
    """

    def __init__(self, reason: str, *, text: str, pos: int, source: str = "<string>"):
        self.reason = reason
        self.source = source
        self.line, self.column = line_and_column(text, pos)
        line_start = text.rfind("\n", 0, max(0, min(pos, len(text)))) + 1
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = len(text)
        quoted = text[line_start:line_end]
        caret_col = self.column - 1
        # Very long lines (a huge constant, a long operand list) are clipped
        # around the column so the message stays readable.
        if len(quoted) > 160:
            lo = max(0, caret_col - 80)
            quoted = ("..." if lo else "") + quoted[lo : lo + 160] + "..."
            caret_col = caret_col - lo + (3 if lo else 0)
        self.quoted_line = quoted
        message = f"{source}:{self.line}:{self.column}: {reason}"
        if text:  # a file that is not HLO text at all has no line to show
            message += f"\n    {quoted}\n    {' ' * caret_col}^"
        super().__init__(message)
