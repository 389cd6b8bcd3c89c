"""deepsharp-contracts: the contract every deepsharp engine is held to.

Run it with `pytest --pyargs deepsharp.contracts --engine SPEC`; the plugin
(`deepsharp.contracts.plugin`, registered through `pytest11`) chooses the engines and writes the
worst roundings it measured (`--contracts-report FILE`). The bounds live in
`deepsharp.contracts.measure`, the float64 reference every engine is held to in
`deepsharp.contracts.reference`.
"""

from deepsharp.contracts.measure import BOUNDS, UNIT, VALUE_ATOL, VALUE_RTOL, Contract, Measurements
from deepsharp.contracts.reference import Float64Engine

__all__ = [
    "BOUNDS",
    "UNIT",
    "VALUE_ATOL",
    "VALUE_RTOL",
    "Contract",
    "Float64Engine",
    "Measurements",
]
