"""Analysis: the science behind the figures and reports (rows, fits, trained-model summaries); draws nothing."""
