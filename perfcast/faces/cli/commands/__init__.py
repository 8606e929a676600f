"""One module per command of the "Predict & decide" panel, its renderers beside it."""
