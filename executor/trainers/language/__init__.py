"""The language trainer: a causal LM trained fully or with LoRA on a job's chats."""
