"""Model and tokenizer files: the tiny default model, save/load of a policy, GGUF import. No generation."""
