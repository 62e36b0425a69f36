"""The networks trained and evaluated: ranked multi-head attention, its spec, the paper's encoder, the GPT-2-style
backbone, the theory transformer, weight-file loading, and the factory that builds a config's model."""
