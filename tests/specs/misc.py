"""Specs of the identity-like primitives (functx/primitives/misc.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from functx.primitives import misc
from tests.specs import PrimSpec
from tests.strategies import array, shapes

SPECS = [
    PrimSpec(
        name="stop_gradient",
        fn=misc.stop_gradient,
        ref=np.asarray,
        args=shapes().flatmap(lambda s: st.tuples(array(s))),
        diff_argnums=(),
    ),
]
