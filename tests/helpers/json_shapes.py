"""Hypothesis strategies for JSON of any shape, for the property tests of the decoders of
server answers (nsqlookupd's, nsqd's ``/stats``): scalars a server might send by mistake
(ports out of range, addresses, names with odd characters), nested at random."""

from __future__ import annotations

from hypothesis import strategies as st

leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-5, max_value=70000)
    | st.floats(allow_nan=False, allow_infinity=False)  # NaN, Infinity: not JSON
    | st.sampled_from(["", "x", "127.0.0.1", "4150", "99999", "a b", "t#ephemeral", "\n"])
    | st.text(max_size=6)
)
json_like = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def keyed_like(keys: list[str], max_leaves: int = 20) -> st.SearchStrategy[object]:
    """JSON whose objects use ``keys`` (a decoder's own field names), so a test reaches the
    decoding of each field rather than only the top level."""
    return st.recursive(
        leaf,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(keys), inner, max_size=5)
        ),
        max_leaves=max_leaves,
    )
