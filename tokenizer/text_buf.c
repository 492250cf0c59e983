/* text_buf.c — see text_buf.h. */
#include "tokenizer/text_buf.h"

/* Length of a Python whitespace character (str.isspace) at s, or 0. */
int tram_text_py_space(const unsigned char *s)
{
    if ((*s >= 0x09 && *s <= 0x0d) || (*s >= 0x1c && *s <= 0x20))
        return 1;
    if (s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
        return 3;   /* U+1680 */
    if (s[0] == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;   /* U+2000..200A, 2028, 2029, 202F */
    if ((s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) || (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80))
        return 3;   /* U+205F, U+3000 */
    return 0;
}
