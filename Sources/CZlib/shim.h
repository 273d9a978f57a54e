// zlib's inflate only: a translated route's gzip or deflate answer, bounded.
#include <zlib.h>
