/* posenc's version and output epoch, apart from the umbrella header so that layers below the
 * cache (the CLI uses core and tensor only) can name them. */
#ifndef POSENC_VERSION_H
#define POSENC_VERSION_H

#define PE_VERSION "0.1.0"
/* Bumped whenever any served number or byte layout changes: it is part of every ETag. */
#define PE_OUTPUT_EPOCH "2"

#endif
