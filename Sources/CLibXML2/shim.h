// libxml2's pull parser (xmlTextReader) only: the answer side's XML decoder.
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/parser.h>
