"""Pure parsers: station command output (text) -> dataclasses. No I/O here."""


class ParseError(ValueError):
    """Output matched none of the known formats; the message quotes what was seen."""
