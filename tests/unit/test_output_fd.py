"""write_fully on a descriptor someone else left non-blocking: a full pipe answers EAGAIN,
and the write must wait for the reader rather than fail with part of a line out."""

from __future__ import annotations

import io
import os
import threading

from nsqctl.cli.output.fd import write_fully


def test_a_full_non_blocking_pipe_gets_every_byte_once_the_reader_reads() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    data = bytes(range(256)) * 4096  # 1 MiB: far more than a pipe holds
    got = bytearray()

    def reader() -> None:
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    failure: list[BaseException] = []

    def writer() -> None:
        try:
            write_fully(io.BytesIO(), write_end, data)
        except BaseException as err:  # reported by the assertion below
            failure.append(err)
        finally:
            os.close(write_end)

    # The writer fills the pipe before anyone reads: its first writes meet EAGAIN.
    write_thread = threading.Thread(target=writer)
    write_thread.start()
    read_thread = threading.Thread(target=reader)
    read_thread.start()
    write_thread.join(30)
    read_thread.join(30)
    os.close(read_end)
    assert not failure, failure
    assert bytes(got) == data
