"""Running compiled models: JIT (``jit``), AOT artifacts (``aot`` writes, ``artifact``
loads) and the calling convention they share (``abi``).

Nothing is imported here, so that ``polyc.load`` needs only numpy and ctypes.
"""
