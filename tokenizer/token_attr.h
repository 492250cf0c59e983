/* token_attr.h — what kind of token an id is, in GGUF's token_type numbering
 * (the same values libsentencepiece's piece types map to in spm_lib.cc). */
#ifndef TRAM_TOK_TOKEN_ATTR_H
#define TRAM_TOK_TOKEN_ATTR_H

enum {
    TRAM_ATTR_NORMAL = 1, TRAM_ATTR_UNKNOWN = 2, TRAM_ATTR_CONTROL = 3,
    TRAM_ATTR_USER = 4, TRAM_ATTR_UNUSED = 5, TRAM_ATTR_BYTE = 6,
};

#endif
