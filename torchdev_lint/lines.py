"""Lines as Python counts them: ended by ``\\n``, ``\\r\\n`` or ``\\r`` only.

``str.splitlines`` also breaks at form feeds, vertical tabs, ``\\x1c``-``\\x1e``, ``\\x85``,
``\\u2028`` and ``\\u2029``, which a Python file can hold without starting a line (a form feed
is whitespace; the others can sit in strings and comments). Line numbers from the parser and
tokenizer count only real line ends, so every text they index is split here.
"""

from __future__ import annotations

import io


def split(text: str, keepends: bool = False) -> list[str]:
    lines = io.StringIO(text, newline="").readlines()
    return lines if keepends else [line.rstrip("\r\n") for line in lines]
