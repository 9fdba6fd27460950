import os

# Tests never reach a hub or a provider; no key exists.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)
