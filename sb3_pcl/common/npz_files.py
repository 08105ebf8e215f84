"""
Reading our ``.npz`` files (replays, episodes) without trusting their sizes: every array's header is read and checked
before any array is allocated.

An ``.npz`` is a zip archive of ``.npy`` members. :func:`read_npz_headers` opens the archive, refuses members that are
not expected arrays without reading them, and reads each ``.npy`` header (shape and dtype, a few hundred bytes) with
NumPy's own parser. A member must declare, in the zip directory, exactly the size its header describes, and must
decompress to at most :data:`MAX_COMPRESSION_RATIO` times its stored size (deflate cannot do better), so a small file
cannot make the loader allocate much more than the sizes the caller allows. The caller then checks the shapes against
what the loading model expects (its spaces, its buffer size) and only then reads the data.
"""

import math
import zipfile
import zlib
from collections.abc import Callable, Collection, Mapping
from typing import IO, NamedTuple

import numpy as np
from numpy.lib import format as npy_format

#: the largest ratio of a member's size to its stored (compressed) size; deflate's own limit is about 1032
MAX_COMPRESSION_RATIO = 1100
#: the largest ``.npy`` header read (NumPy's own default)
MAX_HEADER_SIZE = 10_000


class ArrayHeader(NamedTuple):
    """What an ``.npy`` member of an ``.npz`` declares, read without its data."""

    shape: tuple[int, ...]
    dtype: np.dtype
    #: the size of the array's data in bytes, ``prod(shape) * itemsize``
    nbytes: int


def npz_member_names(file: IO[bytes], name: str, what: str) -> list[str]:
    """
    :param file: an ``.npz`` file open for reading (seekable), at its start
    :param name: how to name the file in messages
    :param what: what the file should be, for the messages (``"PathReplayBuffer"``, ``"episodes"``)
    :return: the names of its arrays (member names without ``.npy``; other members keep their full name)
    :raises ValueError: when the file is not a readable zip archive (naming the file)
    """
    start = file.tell()
    try:
        with zipfile.ZipFile(file) as archive:
            names = [_array_name(info.filename) for info in archive.infolist()]
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as error:
        raise ValueError(f"{name} is not a valid {what} .npz file (unreadable: truncated or corrupt?): {error}") from error
    finally:
        file.seek(start)
    return names


def _array_name(member: str) -> str:
    return member[: -len(".npy")] if member.endswith(".npy") else member


def read_npz_headers(file: IO[bytes], name: str, what: str, allowed: Collection[str]) -> dict[str, ArrayHeader]:
    """
    Read the header of every array of an ``.npz`` file, refusing anything unexpected before reading data.

    :param file: an ``.npz`` file open for reading (seekable), at its start; its position is restored
    :param name: how to name the file in messages
    :param what: what the file should be, for the messages
    :param allowed: the array names the file may hold (others are refused unread)
    :return: each array's header, by name
    :raises ValueError: naming the file and the member: an unexpected member, an object (pickle) dtype, an unreadable
        header, a zip entry whose declared size differs from its header's, or one compressed beyond what deflate can
    """
    start = file.tell()
    headers: dict[str, ArrayHeader] = {}

    def bad(problem: str) -> ValueError:
        return ValueError(f"{name} is not a valid {what} .npz file: {problem}")

    try:
        with zipfile.ZipFile(file) as archive:
            infos = archive.infolist()
            unexpected = sorted(info.filename for info in infos if _array_name(info.filename) not in allowed)
            if unexpected or any(not info.filename.endswith(".npy") for info in infos):
                raise bad(f"unexpected members {unexpected} (refused unread; the file may hold {sorted(allowed)})")
            for info in infos:
                key = _array_name(info.filename)
                if key in headers:
                    raise bad(f"the array {key!r} is stored twice")
                if info.compress_size * MAX_COMPRESSION_RATIO < info.file_size:
                    raise bad(
                        f"the array {key!r} declares {info.file_size} bytes stored in {info.compress_size}: more "
                        "compressed than deflate can be (a crafted archive?)"
                    )
                with archive.open(info) as member:
                    header = _read_header(member, key, bad)
                    data_offset = member.tell()
                if info.file_size != data_offset + header.nbytes:
                    raise bad(
                        f"the array {key!r} has a header describing {data_offset + header.nbytes} bytes but the archive "
                        f"declares {info.file_size}"
                    )
                headers[key] = header
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as error:
        raise ValueError(f"{name} is not a valid {what} .npz file (unreadable: truncated or corrupt?): {error}") from error
    finally:
        file.seek(start)
    return headers


def _read_header(member: IO[bytes], key: str, bad: Callable[[str], ValueError]) -> ArrayHeader:
    """:return: the header of one ``.npy`` member, read with NumPy's parser (never its data)"""
    try:
        version = npy_format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(member, max_header_size=MAX_HEADER_SIZE)
        elif version == (2, 0):
            shape, _, dtype = npy_format.read_array_header_2_0(member, max_header_size=MAX_HEADER_SIZE)
        else:
            raise ValueError(f".npy format version {version}")
    except (ValueError, TypeError, SyntaxError) as error:
        raise bad(f"the array {key!r} has an unreadable header ({error})") from None
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise bad(f"the array {key!r} holds Python objects (dtype {dtype}), which only a pickle can read")
    return ArrayHeader(tuple(int(n) for n in shape), dtype, math.prod(shape) * dtype.itemsize)


def check_header(
    headers: Mapping[str, ArrayHeader],
    key: str,
    dtype: np.dtype | str | type | None,
    shape: tuple[int | None, ...],
    name: str,
    what: str,
    max_rows: int | None = None,
) -> ArrayHeader:
    """
    Check one array's header against what the loader expects, before the array is read.

    :param headers: the file's headers (:func:`read_npz_headers`)
    :param key: the array's name
    :param dtype: its expected dtype (``None``: any numeric dtype)
    :param shape: its expected shape; ``None`` entries are free (bounded by ``max_rows`` for the first one)
    :param name: how to name the file in messages
    :param what: what the file should be, for the messages
    :param max_rows: the largest first dimension allowed when it is free
    :return: the header
    :raises ValueError: naming the array, its declared dtype and shape, and what was expected
    """
    header = headers.get(key)
    if header is None:
        raise ValueError(f"{name} is not a valid {what} .npz file: the array {key!r} is missing")
    fits = len(header.shape) == len(shape) and all(
        expected is None or declared == expected for declared, expected in zip(header.shape, shape, strict=True)
    )
    within = max_rows is None or not header.shape or header.shape[0] <= max_rows
    if dtype is not None and header.dtype != np.dtype(dtype):
        fits = False
    if not (fits and within):
        expected_shape = "(" + ", ".join("n" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
        bound = f" with n <= {max_rows}" if max_rows is not None else ""
        raise ValueError(
            f"{name} is not a valid {what} .npz file: the array {key!r} declares dtype {header.dtype} and shape "
            f"{header.shape}, expected {'' if dtype is None else np.dtype(dtype).name + ' '}{expected_shape}{bound} "
            "(refused before reading it)"
        )
    return header
