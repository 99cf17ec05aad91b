/* posenc dashboard: colormap (being written). */
