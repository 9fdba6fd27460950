"""The blocks every metric graph is built from: the nodes (:mod:`.nodes`), the one scoring engine
(:mod:`.scoring`), the statement steps (:mod:`.statements`), the shared graph state (:mod:`.state`), the
run-time steering of judge steps (:mod:`.replay`) and compiling (:mod:`.compiling`)."""
