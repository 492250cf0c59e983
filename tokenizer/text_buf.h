/* text_buf.h — Python's notion of whitespace, which str.strip(), str.split()
 * and Jinja's trim filter use. */
#ifndef TRAM_TEXT_BUF_H
#define TRAM_TEXT_BUF_H

/* The length of the Python whitespace character (str.isspace) at s, or 0;
 * s is NUL-terminated, or has the character's bytes. */
int tram_text_py_space(const unsigned char *s);

#endif
