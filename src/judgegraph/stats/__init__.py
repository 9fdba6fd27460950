"""Statistics shared by ``trust`` and ``compare``, in plain numpy: agreement between raters
(:mod:`.raters`) and paired tests of two runs (:mod:`.paired`)."""
