"""What a person looks at: graph pictures (:mod:`.drawing`) and the HTML
report of a results file (:mod:`.html`)."""
