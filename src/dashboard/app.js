/* posenc dashboard (placeholder until the dashboard lands). */
"use strict";
