"""A PyTorch profiler (Kineto) trace as measurements: read it (:mod:`.reader`, names:
:mod:`.names`), learn which layer it profiled (:mod:`.layer`), map its GEMMs, memory-bound
ops and collectives onto atpsim's program (:mod:`.mapping`) and predict each one
(:mod:`.compare`). ``atpsim validate TRACE.json`` runs the chain."""
