/* regex.h — a practical regular-expression subset compiled to GBNF.
 *
 * Supported: literals and escapes (\n \t \r \f \v \\ \. \uXXXX and every
 * escaped punctuation character), classes [a-z] [^...] with \d \w \s
 * inside, \d \D \w \W \s \S, `.` (any character but a newline), groups
 * (...) (?:...) (?<name>...) (?P<name>...), alternation |, and the
 * quantifiers * + ? {m} {m,} {m,n}, lazy or not (the language is the
 * same).  ^ and $ are accepted at the very start and end only.  Anything
 * else (backreferences, lookaround, \b, possessive quantifiers, flags) is
 * an error naming it.  The rule matches exactly the strings the regex
 * matches in full (Python's re.fullmatch). */
#ifndef TRAM_GRAMMAR_REGEX_H
#define TRAM_GRAMMAR_REGEX_H

#include "grammar/gbnf_text.h"
#include "kernels/base.h"

/* Appends the rule `rule ::= ...` for regex to out.  json_string: the
 * text goes inside a JSON string, so characters that JSON must escape are
 * written escaped (", \) or left out (control characters). */
int tram_regex_rule(const char *regex, const char *rule, int json_string, tram_strbuf *out,
                    tram_error *err);

/* GBNF text whose rule `rule` matches the regex's full matches. */
int tram_regex_to_gbnf(const char *regex, const char *rule, char **gbnf_out, tram_error *err);

#endif
