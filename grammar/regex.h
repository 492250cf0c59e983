/* regex.h — a practical regular-expression subset compiled to GBNF.
 *
 * Supported: literals and escapes (\n \t \r \f \v \\ \. \uXXXX and every
 * escaped punctuation character), classes [a-z] [^...] with \d \w \s
 * inside, \d \D \w \W \s \S, `.` (any character but a newline), groups
 * (...) (?:...) (?<name>...) (?P<name>...), alternation |, and the
 * quantifiers * + ? {m} {m,} {m,n}, lazy or not (the language is the
 * same), negated shorthands inside a class ([\S\d]).  ^ is accepted where
 * nothing can have been matched yet (the start of the pattern, of its
 * top-level alternatives and of groups that open them), $ where nothing
 * can be matched after it: the end of the pattern or of an alternative
 * that ends it, in groups too (`(a$|b)`, `^(foo|bar$)`, `(^x+$)?`).
 * Lookaround ((?=...) (?!...) (?<=...) (?<!...)), and an anchor elsewhere
 * (`^(a(,|$))+$`), are left out where the caller validates the result
 * (tram_regex_rule's approx): the rule then matches more than the regex.
 * Anything else (backreferences, \b, possessive quantifiers, flags) is an
 * error naming it.  The rule matches exactly the strings the regex
 * matches in full (Python's re.fullmatch). */
#ifndef TRAM_GRAMMAR_REGEX_H
#define TRAM_GRAMMAR_REGEX_H

#include "grammar/gbnf_text.h"
#include "kernels/base.h"

/* Appends the rule `rule ::= ...` for regex to out.  json_string: the
 * text goes inside a JSON string, so characters that JSON must escape are
 * written escaped (", \) or left out (control characters).  approx: NULL,
 * a lookaround (or an anchor elsewhere) is an error; else it is left out
 * and *approx set to 1 (the caller must then check what the rule generates
 * against the regex). */
int tram_regex_rule(const char *regex, const char *rule, int json_string, int *approx, tram_strbuf *out,
                    tram_error *err);

/* GBNF text whose rule `rule` matches the regex's full matches. */
int tram_regex_to_gbnf(const char *regex, const char *rule, char **gbnf_out, tram_error *err);

#endif
