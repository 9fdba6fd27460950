"""What judging reads and writes: the conversation model (:mod:`.conversation`), its exchanges and windows
(:mod:`.windows`), prompt files (:mod:`.prompts`), the verdict record (:mod:`.results`) and the types of
the judges' answers (:mod:`.answers`)."""
