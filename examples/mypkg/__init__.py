"""An example package of custom judges, for the CLI's import paths:

    PYTHONPATH=examples judgegraph eval examples/support_chats.jsonl \
        -m mypkg.judges:politeness -m mypkg.judges:goal_met --model openai:gpt-4.1-mini
"""
