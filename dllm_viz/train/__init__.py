"""Training code for the bundled tiny dLLM (tokenizer, data, objective, loop, export)."""
