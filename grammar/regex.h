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
 * (tram_regex_rule's approx), and a backreference \1..\9 there stands for
 * any match of its group: the rule then matches more than the regex.
 * Anything else (\b, possessive quantifiers, flags) is an error naming it.  The rule matches exactly the strings the regex
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

/* What tram_regex_rule_lengths returns when it writes nothing. */
#define TRAM_REGEX_TOO_LARGE 1 /* the product is over its bounds: keep tram_regex_rule and validate */
#define TRAM_REGEX_NO_LENGTH 2 /* no full match has a length in the range */

/* Appends the rule `rule` (and helper rules named after it) for the full
 * matches of regex whose length in characters lies in [min, max] (max < 0:
 * no upper bound), exactly: JSON Schema's pattern beside minLength and
 * maxLength.  Where the regex's own lengths decide it, that is its plain
 * rule (or TRAM_REGEX_NO_LENGTH); else its NFA is crossed with a counter
 * of the characters read (regex_length.c), one rule per pair, which are
 * taken from *pairs_left (a budget shared by a document's patterns).
 * Returns 0, a TRAM_REGEX_ code (nothing written) or -1 (the regex's
 * error, as tram_regex_rule gives it). */
int tram_regex_rule_lengths(const char *regex, const char *rule, int json_string, long long min, long long max,
                            int *approx, int *pairs_left, tram_strbuf *out, tram_error *err);

/* Whether regex has an alternation outside every group (`^a|b$`): its
 * anchors then bind its first and last alternative only. */
int tram_regex_alternates_at_top(const char *regex);

/* GBNF text whose rule `rule` matches the regex's full matches. */
int tram_regex_to_gbnf(const char *regex, const char *rule, char **gbnf_out, tram_error *err);

#endif
