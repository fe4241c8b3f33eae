"""The model and tokenizer stack: a model file's facts (GGUF metadata, vocabulary) and the tokenizers built from them."""
