// libxml2's pull parser (xmlTextReader) only: the answer side's XML decoder.
//
// Debian builds libxml2 with ICU, and its encoding.h then includes ICU's
// headers, whose UErrorCode differs from the one Foundation's own ICU
// declares: one Swift module cannot see both. The reader's API takes no ICU
// type, so the ICU part of libxml2's headers is left out here.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/parser.h>
