"""Documents written from every committed store through the study registry: the results index of results/README.md
(`results_index`) and the generated blocks of the docs (`doc_blocks`). This room sits above `experiments.studies`
(they judge each store's sweeps by its presets' own claims and rules) and below the command line."""
