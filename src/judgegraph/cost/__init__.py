"""What a run costs: prices (:mod:`.pricing`) and the dry run's estimate (:mod:`.dryrun`)."""
