"""What was measured, as typed samples: a machine's measurements folder (:mod:`.folder`: CSV
tables, :mod:`.tables`; nccl-tests logs, :mod:`.nccl_tests`; the machine description,
:mod:`.description`), the sample types (:mod:`.samples`) and the folder's tolerance
(:mod:`.settings`)."""
