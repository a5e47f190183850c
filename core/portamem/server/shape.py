"""What a JSON request body will cost to parse, told from its bytes before it is parsed.

Parsed, a body costs far more than its size when it is made of many small values: a 4 MiB body of
tiny metadata keys became about 30 times that in dictionaries, strings and the copies validation makes
(8 such bodies at once grew a server by 430 MiB and held ``/v1/health`` for 6.9 s). ``measure`` reads
the raw bytes with numpy, half a MiB at a time (the strings told by their unescaped quotes, then the
values and the nesting outside them), holding a chunk's worth of arrays at most, and
``check`` refuses (413 ``PayloadTooLargeError``) a body with more values than ``MAX_VALUES``, nested
deeper than ``MAX_DEPTH`` or holding a string longer than ``MAX_STRING_BYTES``, before the JSON parser
sees it. ``Shape.cost`` is what the body holds in memory once parsed, which the guard charges to the
bytes-in-flight budget (``limits.Budget``) in place of its size, so heavy bodies parse one after another.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PayloadTooLargeError

__all__ = ["MAX_DEPTH", "MAX_STRING_BYTES", "MAX_VALUES", "Shape", "check", "measure"]

#: JSON values (object members and array items) one body may hold: a batch of 256 memories with all their
#: fields, 64 entities and a dozen metadata keys each holds about 23,000; ~350k tiny keys fit in 4 MiB.
#: The body's parse and validation run in the event loop (FastAPI): 100,000 values held it 240 ms
MAX_VALUES = 50_000
#: nesting levels one body may hold: a batch's draft's metadata (``Settings.max_metadata_depth``, 16)
#: sits 4 levels down
MAX_DEPTH = 32
#: bytes of the longest string, as sent (escapes and all): a metadata value may take ``max_metadata_bytes``
#: (1,000,000) and no field is longer
MAX_STRING_BYTES = 1_000_000
#: bytes one value costs once parsed, measured: a small dict member, list item or short string with its
#: object, counted in the parse and in the copies the request's validation makes
VALUE_COST = 400

_CHUNK = 1 << 19
_QUOTE, _BACKSLASH, _COMMA = 34, 92, 44
_OPEN, _CLOSE = (91, 123), (93, 125)


_CHUNK = 1 << 19
_QUOTE, _BACKSLASH, _COMMA = 34, 92, 44
_OPEN, _CLOSE = (91, 123), (93, 125)


@dataclass(frozen=True)
class Shape:
    """What ``measure`` found: values, deepest nesting, longest string (in bytes), and the size."""

    values: int
    depth: int
    longest_string: int
    size: int

    @property
    def cost(self) -> int:
        """Bytes the parsed body holds, about: its size, or its values at ``VALUE_COST`` when more."""
        return max(self.size, self.values * VALUE_COST)


class _Scan:
    """``measure``'s state from one chunk to the next: whether a string is open (and where it began), the
    parity of the backslashes the last chunk ended with, and the nesting level."""

    def __init__(self) -> None:
        self.values = self.depth = self.level = self.longest = 0
        self.string_at: int | None = None  # the open string's first quote, while one is open
        self.escaping = 0  # 1 when the chunk before ended with an odd run of backslashes

    def escaped(self, chunk: np.ndarray) -> np.ndarray | None:
        """Which bytes of ``chunk`` a backslash escapes (an odd run of backslashes before them); None: none."""
        slash = chunk == _BACKSLASH
        if not self.escaping and not slash.any():
            return None
        index = np.arange(len(chunk), dtype=np.int32)
        plain = np.maximum.accumulate(np.where(slash, np.int32(-1), index))  # the last byte that is no backslash
        run = np.empty(len(chunk), dtype=np.int32)  # backslashes right before each byte
        run[0] = self.escaping
        run[1:] = index[:-1] - plain[:-1] + np.where(plain[:-1] < 0, self.escaping, 0)
        tail = len(chunk) - 1 - int(plain[-1]) + (self.escaping if plain[-1] < 0 else 0)
        self.escaping = tail & 1
        return (run & 1).astype(bool)

    def feed(self, chunk: np.ndarray, offset: int) -> None:
        escaped = self.escaped(chunk)
        quote = chunk == _QUOTE
        if escaped is not None:
            quote &= ~escaped
        inside = (np.cumsum(quote, dtype=np.int32) + (self.string_at is not None)) & 1
        outside = inside == 0
        self.values += int(np.count_nonzero(outside & ((chunk == _COMMA) | (chunk == _OPEN[0]) | (chunk == _OPEN[1]))))
        step = (((chunk == _OPEN[0]) | (chunk == _OPEN[1])).astype(np.int32)
                - ((chunk == _CLOSE[0]) | (chunk == _CLOSE[1]))) * outside
        if step.any():
            run = np.cumsum(step, dtype=np.int64) + self.level
            self.depth, self.level = max(self.depth, int(run.max())), int(run[-1])
        quotes = np.flatnonzero(quote) + offset
        if self.string_at is not None:
            quotes = np.concatenate(([self.string_at], quotes))
        if len(quotes) >= 2:
            pairs = len(quotes) // 2 * 2
            self.longest = max(self.longest, int((quotes[1:pairs:2] - quotes[0:pairs:2]).max()) - 1)
        self.string_at = int(quotes[-1]) if len(quotes) % 2 else None
        if self.string_at is not None:  # open to the end of the chunk so far
            self.longest = max(self.longest, offset + len(chunk) - self.string_at - 1)


def measure(body: bytes) -> Shape:
    """The shape of ``body`` (JSON; what is not JSON is measured as well as it reads, and the parser
    refuses it afterwards)."""
    scan = _Scan()
    for offset in range(0, len(body), _CHUNK):
        scan.feed(np.frombuffer(body, dtype=np.uint8, count=min(_CHUNK, len(body) - offset), offset=offset), offset)
    return Shape(values=scan.values, depth=scan.depth, longest_string=scan.longest, size=len(body))


def check(body: bytes) -> Shape:
    """``measure``, refused with ``PayloadTooLargeError`` past the bounds of the module docstring."""
    shape = measure(body)
    if shape.values > MAX_VALUES:
        raise PayloadTooLargeError(f"the request body holds {shape.values} JSON values; this server parses at most "
                                   f"{MAX_VALUES} in one body (fewer metadata keys or list items, or several requests)")
    if shape.depth > MAX_DEPTH:
        raise PayloadTooLargeError(f"the request body is nested {shape.depth} levels deep; this server parses at most "
                                   f"{MAX_DEPTH}")
    if shape.longest_string > MAX_STRING_BYTES:
        raise PayloadTooLargeError(f"the request body holds a string longer than {MAX_STRING_BYTES} bytes, "
                                   "longer than any field takes")
    return shape
