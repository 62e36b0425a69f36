"""Training, sweeps, results, figures and the `attnrank` command line (imports theory/ and constructions/)."""
