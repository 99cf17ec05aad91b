/* posenc dashboard: snippets (being written). */
