/* docs/cmd/<name>.md as a man page and as the --help text: one source for
 * `man vramledger-<name>`, `vramledger <name> --help` and the docs. A build
 * tool, not part of vramledger.
 *
 *   md2man VERSION IN.md OUT.1            one command's page
 *   md2man VERSION --index OUT.1 NAME...  vramledger.1: the list of pages
 *   md2man VERSION --help IN.md OUT.c     the --help text, as
 *                                         const char vl_help_<NAME>[]
 *
 * A page is "# vramledger NAME", a lead paragraph, then "##" sections:
 * "Synopsis", "Options" (option lines "    --flag ARG  text", continued
 * further indented, grouped under "###" headings), the page's own sections,
 * "Exit status", "Examples" (or "Example"), and optionally "Environment",
 * "Files", "See also". The man page puts them in man-pages(7)'s order: NAME
 * (the lead's first sentence), SYNOPSIS, DESCRIPTION (the lead, then the
 * page's own sections as subsections), OPTIONS, EXIT STATUS, EXAMPLES,
 * ENVIRONMENT, FILES, SEE ALSO. --help is the synopsis, the lead and the
 * options, then where the rest is, without Markdown's backquotes.
 *
 * The Markdown is the subset docs/cmd/ uses: headings, paragraphs, "- "
 * lists, 4-space code blocks, `code`, **bold**, *emphasis*, [text](link).
 * Roff: groff_man(7). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, strcasecmp */
#endif
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The standard sections, in the man page's order; S_OWN is one of the
 * page's own, a subsection of DESCRIPTION. */
enum kind {
  S_SYNOPSIS,
  S_DESCRIPTION,
  S_OPTIONS,
  S_EXIT,
  S_EXAMPLES,
  S_ENV,
  S_FILES,
  S_SEEALSO,
  S_OWN,
  S_N = S_OWN
};
static const struct {
  const char *md, *man;
} kinds[S_N] = {{"Synopsis", "SYNOPSIS"}, {"Description", "DESCRIPTION"},
                {"Options", "OPTIONS"},   {"Exit status", "EXIT STATUS"},
                {"Examples", "EXAMPLES"}, {"Environment", "ENVIRONMENT"},
                {"Files", "FILES"},       {"See also", "SEE ALSO"}};

static enum kind kind_of(const char *title) {
  if (strcasecmp(title, "Example") == 0) return S_EXAMPLES;
  for (int k = 0; k < S_N; k++)
    if (strcasecmp(title, kinds[k].md) == 0) return (enum kind)k;
  return S_OWN;
}

/* The page: its lines, and where each "##" section's body runs. */
#define MAX_SECTIONS 64
struct page {
  char **line;
  size_t n;
  char name[256];
  size_t lead_from, lead_to; /* after the title, before the first "##" */
  struct section {
    const char *title;
    enum kind kind;
    size_t from, to; /* body: the lines after the heading */
  } sec[MAX_SECTIONS];
  int nsec;
};

static void strip_newline(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
    s[--n] = 0;
}

static int page_read(struct page *p, const char *path) {
  FILE *in = fopen(path, "r");
  if (!in) return perror(path), 1;
  char buf[4096];
  size_t cap = 0;
  memset(p, 0, sizeof *p);
  while (fgets(buf, sizeof buf, in)) {
    strip_newline(buf);
    if (p->n == cap) {
      cap = cap ? 2 * cap : 256;
      p->line = realloc(p->line, cap * sizeof *p->line);
      if (!p->line) return fputs("md2man: out of memory\n", stderr), fclose(in), 1;
    }
    p->line[p->n] = strdup(buf);
    if (!p->line[p->n++]) return fputs("md2man: out of memory\n", stderr), fclose(in), 1;
  }
  fclose(in);
  size_t i = 0;
  while (i < p->n && strncmp(p->line[i], "# vramledger ", 13) != 0)
    i++;
  if (i == p->n) return fprintf(stderr, "%s: no '# vramledger NAME' title\n", path), 1;
  snprintf(p->name, sizeof p->name, "%.200s", p->line[i] + 13);
  p->lead_from = i + 1;
  p->lead_to = p->n;
  for (i++; i < p->n; i++) {
    if (strncmp(p->line[i], "## ", 3) != 0) continue;
    if (p->nsec == MAX_SECTIONS) return fprintf(stderr, "%s: too many sections\n", path), 1;
    if (p->nsec == 0)
      p->lead_to = i;
    else
      p->sec[p->nsec - 1].to = i;
    p->sec[p->nsec].title = p->line[i] + 3;
    p->sec[p->nsec].kind = kind_of(p->line[i] + 3);
    p->sec[p->nsec].from = i + 1;
    p->sec[p->nsec++].to = p->n;
  }
  return 0;
}

/* Text with roff's specials escaped and the inline marks as fonts. */
static void inline_text(FILE *o, const char *s) {
  int code = 0, bold = 0, em = 0;
  if (*s == '.' || *s == '\'') fputs("\\&", o);
  for (; *s; s++) {
    if (*s == '\\') {
      fputs("\\e", o);
    } else if (*s == '-') {
      fputs("\\-", o);
    } else if (*s == '`') {
      fputs((code = !code) ? "\\fB" : "\\fR", o);
    } else if (!code && s[0] == '*' && s[1] == '*') {
      fputs((bold = !bold) ? "\\fB" : "\\fR", o);
      s++;
    } else if (!code && *s == '*' && (em || (s[1] && !isspace((unsigned char)s[1])))) {
      fputs((em = !em) ? "\\fI" : "\\fR", o);
    } else {
      fputc(*s, o);
    }
  }
  if (code || bold || em) fputs("\\fR", o);
  fputc('\n', o);
}

static void verbatim(FILE *o, const char *s) {
  fputs("\\&", o);
  for (; *s; s++)
    if (*s == '\\')
      fputs("\\e", o);
    else if (*s == '-')
      fputs("\\-", o);
    else
      fputc(*s, o);
  fputc('\n', o);
}

static void heading(FILE *o, const char *macro, const char *s, int upper) {
  fprintf(o, "%s \"", macro);
  for (; *s; s++)
    fputc(upper ? toupper((unsigned char)*s) : *s, o);
  fputs("\"\n", o);
}

/* An option line's tag ("--model FILE|NAME", "-o, --out DIR"): the flags
 * bold, their arguments italic. */
static void option_tag(FILE *o, const char *s, size_t n) {
  fputs(".TP\n", o);
  int word = 0, flag = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!word && c != ' ' && c != ',') {
      word = 1;
      flag = c == '-';
      fputs(flag ? "\\fB" : "\\fI", o);
    } else if (word && (c == ' ' || c == ',')) {
      word = 0;
      fputs("\\fR", o);
    }
    if (c == '\\')
      fputs("\\e", o);
    else if (c == '-')
      fputs("\\-", o);
    else
      fputc(c, o);
  }
  fputs(word ? "\\fR\n" : "\n", o);
}

/* A Markdown table (lines [from, to) starting with '|', the second the
 * "|---|" rule) as tbl(1): the header row bold, a column with a cell over
 * 22 characters filled to the page's width. man runs tbl on the page for
 * the first line's '\" t. */
static void table(FILE *o, char **line, size_t from, size_t to) {
  enum { MAX_COLS = 16 };
  int wide[MAX_COLS] = {0}, cols = 0;
  for (size_t i = from; i < to; i++) {
    int c = 0;
    for (const char *p = line[i] + 1; *p; c++) {
      const char *bar = strchr(p, '|');
      size_t n = bar ? (size_t)(bar - p) : strlen(p);
      if (c < MAX_COLS && n > 22) wide[c] = 1;
      if (!bar) break;
      p = bar + 1;
      if (!*p) {
        c++;
        break;
      }
    }
    if (c > cols) cols = c;
  }
  if (cols > MAX_COLS) cols = MAX_COLS;
  fputs(".na\n.TS\n", o); /* ragged cells: a narrow column cannot be adjusted */
  for (int r = 0; r < 2; r++) {
    for (int c = 0; c < cols; c++)
      fprintf(o, "%sl%s%s", c ? " " : "", r ? "" : "B", wide[c] ? "x" : "");
    fputs(r ? ".\n" : "\n", o);
  }
  for (size_t i = from; i < to; i++) {
    if (strspn(line[i], "|-: ") == strlen(line[i])) continue; /* the rule */
    char cell[4096];
    const char *p = line[i] + 1;
    for (int c = 0; c < cols && *p; c++) {
      const char *bar = strchr(p, '|');
      size_t n = bar ? (size_t)(bar - p) : strlen(p);
      while (n && p[0] == ' ')
        p++, n--;
      while (n && p[n - 1] == ' ')
        n--;
      snprintf(cell, sizeof cell, "%.*s", (int)n, p);
      fputs(c ? "\tT{\n" : "T{\n", o);
      inline_text(o, cell);
      fputs("T}", o);
      p = bar ? bar + 1 : p + n;
    }
    fputc('\n', o);
  }
  fputs(".TE\n.ad\n", o);
}

enum { R_OPTIONS = 1, R_DEMOTE = 2 };

/* Lines [from, to) as roff. R_OPTIONS: lines indented 4 are option entries
 * (.TP: "--flag ARG", or "estimate flags"), their further-indented lines
 * the entry's text. R_DEMOTE: the body of a subsection, whose "###"
 * headings become bold lines. */
static void render(FILE *o, char **line, size_t from, size_t to, int how) {
  int pre = 0, list = 0, opt = 0, para = 0, fresh = 1; /* fresh: after a heading */
  for (size_t i = from; i < to; i++) {
    const char *l = line[i];
    int indented = strncmp(l, "    ", 4) == 0;
    if (pre && !indented && l[0]) fputs(".fi\n.RE\n", o), pre = 0;
    if (!l[0]) {
      if (pre) fputc('\n', o);
      list = opt = 0;
      para = 1;
      continue;
    }
    if (l[0] == '|') {
      size_t end = i;
      while (end < to && line[end][0] == '|')
        end++;
      if (para && !fresh) fputs(".PP\n", o);
      table(o, line, i, end);
      i = end - 1;
      para = list = opt = 0;
      fresh = 0;
      continue;
    }
    int head = l[0] == '#';
    int option = (how & R_OPTIONS) && indented && l[4] && l[4] != ' ';
    if (option && pre) fputs(".fi\n.RE\n", o), pre = 0;
    if (para && !fresh && !head && !pre && !option && !(indented && (list || opt)))
      fputs(".PP\n", o);
    para = 0;
    fresh = head;
    if (option) {
      const char *tag = l + 4, *gap = strstr(tag, "  ");
      option_tag(o, tag, gap ? (size_t)(gap - tag) : strlen(tag));
      if (gap) {
        while (*gap == ' ')
          gap++;
        inline_text(o, gap);
      }
      opt = 1;
    } else if (indented && !list && !opt) {
      if (!pre) fputs(".RS 4\n.nf\n", o), pre = 1;
      verbatim(o, l + 4);
    } else if (strncmp(l, "### ", 4) == 0) {
      if (how & R_DEMOTE) {
        fputs(".PP\n", o);
        fputs(".B ", o);
        inline_text(o, l + 4);
        fresh = 0;
      } else {
        heading(o, ".SS", l + 4, 0);
      }
    } else if (strncmp(l, "- ", 2) == 0) {
      fputs(".IP \\(bu 2\n", o);
      inline_text(o, l + 2);
      list = 1;
    } else {
      while (*l == ' ')
        l++;
      inline_text(o, l);
    }
  }
  if (pre) fputs(".fi\n.RE\n", o);
}

/* The first sentence of the lead: the NAME line's summary. */
static void summary(const struct page *p, char *out, size_t n) {
  out[0] = 0;
  for (size_t i = p->lead_from; i < p->lead_to; i++) {
    const char *l = p->line[i];
    if (!l[0] && out[0]) break;
    if (!l[0]) continue;
    size_t k = strlen(out);
    snprintf(out + k, n - k, "%s%s", k ? " " : "", l);
    char *dot = strstr(out, ". ");
    if (dot) dot[1] = 0;
    k = strlen(out);
    if (k && out[k - 1] == '.') break;
  }
  for (char *q = out; *q; q++)
    if (*q == '`' || *q == '*') memmove(q, q + 1, strlen(q)), q--;
  /* man-pages(7): lower case, no final period ("Say how" but "CI gate") */
  size_t k = strlen(out);
  if (k && out[k - 1] == '.') out[--k] = 0;
  if (isupper((unsigned char)out[0]) && islower((unsigned char)out[1]))
    out[0] = (char)tolower((unsigned char)out[0]);
}

static int man_page(const char *version, const char *inp, const char *outp) {
  static struct page p; /* lives until the program exits: reachable, not a leak */
  if (page_read(&p, inp)) return 1;
  FILE *o = fopen(outp, "w");
  if (!o) return perror(outp), 1;
  char sum[1024];
  summary(&p, sum, sizeof sum);
  fputs("'\\\" t\n.TH VRAMLEDGER-", o);
  for (const char *q = p.name; *q; q++)
    fputc(toupper((unsigned char)*q), o);
  fprintf(o, " 1 \"\" \"vramledger %s\" \"vramledger manual\"\n", version);
  fprintf(o, ".SH NAME\nvramledger\\-%s \\- ", p.name);
  inline_text(o, sum);
  int seealso = 0;
  for (int k = 0; k < S_N; k++) {
    int said = 0;
    if (k == S_DESCRIPTION) {
      fputs(".SH DESCRIPTION\n", o);
      render(o, p.line, p.lead_from, p.lead_to, 0);
      for (int s = 0; s < p.nsec; s++) {
        if (p.sec[s].kind != S_OWN && p.sec[s].kind != S_DESCRIPTION) continue;
        if (p.sec[s].kind == S_OWN) heading(o, ".SS", p.sec[s].title, 0);
        render(o, p.line, p.sec[s].from, p.sec[s].to, R_DEMOTE);
      }
      continue;
    }
    for (int s = 0; s < p.nsec; s++) {
      if ((int)p.sec[s].kind != k) continue;
      if (!said) heading(o, ".SH", kinds[k].man, 0), said = 1;
      render(o, p.line, p.sec[s].from, p.sec[s].to, k == S_OPTIONS ? R_OPTIONS : 0);
    }
    if (k == S_SEEALSO) seealso = said;
  }
  fputs(seealso ? ".PP\nvramledger(1)\n" : ".SH SEE ALSO\nvramledger(1)\n", o);
  return fclose(o) ? (perror(outp), 1) : 0;
}

/* Lines [from, to) without their leading and trailing blank lines. */
static void trim(char **line, size_t *from, size_t *to) {
  while (*from < *to && !line[*from][0])
    (*from)++;
  while (*to > *from && !line[*to - 1][0])
    (*to)--;
}

/* One line of the --help text as a C string literal's piece. */
static void c_line(FILE *o, const char *prefix, const char *s) {
  fputs("    \"", o);
  for (const char *parts[2] = {prefix, s}, **q = parts; q < parts + 2; q++)
    for (const char *c = *q; *c; c++)
      if (*c == '"' || *c == '\\' || *c == '?') /* '?': no trigraphs */
        fprintf(o, "\\%c", *c);
      else if (*c != '`') /* `code` reads as code without its marks */
        fputc(*c, o);
  fputs("\\n\"\n", o);
}

/* The --help text: "Usage:" and the synopsis, the lead, "Options:" and the
 * options ("###" groups as "  Group:"), then where the full text is. Every
 * other line is the page's own, less its backquotes (tests/cli/help.sh). */
static int help_page(const char *inp, const char *outp) {
  static struct page p; /* lives until the program exits: reachable, not a leak */
  if (page_read(&p, inp)) return 1;
  int syn = -1, opts = -1;
  for (int s = 0; s < p.nsec; s++)
    if (p.sec[s].kind == S_SYNOPSIS && syn < 0)
      syn = s;
    else if (p.sec[s].kind == S_OPTIONS && opts < 0)
      opts = s;
  if (syn < 0 || opts < 0)
    return fprintf(stderr, "%s: --help needs a '## Synopsis' and a '## Options' section\n", inp), 1;
  FILE *o = fopen(outp, "w");
  if (!o) return perror(outp), 1;
  fprintf(o, "/* generated from %s by cmake/md2man.c */\nconst char vl_help_%s[] =\n", inp, p.name);
  size_t from = p.sec[syn].from, to = p.sec[syn].to;
  trim(p.line, &from, &to);
  c_line(o, "", "Usage:");
  for (size_t i = from; i < to; i++)
    c_line(o, "", p.line[i]);
  from = p.lead_from, to = p.lead_to;
  trim(p.line, &from, &to);
  c_line(o, "", "");
  for (size_t i = from; i < to; i++)
    c_line(o, "", p.line[i]);
  from = p.sec[opts].from, to = p.sec[opts].to;
  trim(p.line, &from, &to);
  c_line(o, "", "");
  c_line(o, "", "Options:");
  for (size_t i = from; i < to; i++)
    if (strncmp(p.line[i], "### ", 4) == 0) {
      char group[4096];
      snprintf(group, sizeof group, "%s:", p.line[i] + 4);
      c_line(o, "  ", group);
    } else {
      c_line(o, "", p.line[i]);
    }
  c_line(o, "", "");
  char where[600];
  snprintf(where, sizeof where, "The full text: man vramledger-%s, or docs/cmd/%s.md", p.name,
           p.name);
  c_line(o, "", where);
  fputs("    ;\n", o);
  return fclose(o) ? (perror(outp), 1) : 0;
}

static int index_page(const char *version, const char *outp, int n, char **names) {
  FILE *o = fopen(outp, "w");
  if (!o) return perror(outp), 1;
  fprintf(o, ".TH VRAMLEDGER 1 \"\" \"vramledger %s\" \"vramledger manual\"\n", version);
  fputs(".SH NAME\nvramledger \\- how much GPU memory a PyTorch job takes, and where every byte "
        "goes\n.SH SYNOPSIS\n.B vramledger\n.I command\n[options]\n.SH DESCRIPTION\n"
        "Estimates a training or inference job's GPU memory before launch, measures it while it "
        "runs (process, allocator and framework layers, phase by phase), and turns both into "
        "hardware, cost and go/no\\-go decisions. Each command has its page; "
        "\\fBvramledger\\fR \\fIcommand\\fR \\fB\\-\\-help\\fR prints its synopsis and "
        "options.\n.SH COMMANDS\n",
        o);
  for (int i = 0; i < n; i++)
    fprintf(o, ".TP\n.B %s\nvramledger\\-%s(1)\n", names[i], names[i]);
  fputs(".SH FILES\n\\fBvramledger \\-\\-paths\\fR prints where the bundled data, the Python "
        "side and the interposer were found.\n",
        o);
  return fclose(o) ? (perror(outp), 1) : 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[2], "--index") == 0)
    return index_page(argv[1], argv[3], argc - 4, argv + 4);
  if (argc == 5 && strcmp(argv[2], "--help") == 0) return help_page(argv[3], argv[4]);
  if (argc == 4) return man_page(argv[1], argv[2], argv[3]);
  fprintf(stderr, "usage: md2man VERSION IN.md OUT.1 | md2man VERSION --index OUT.1 NAME... | "
                  "md2man VERSION --help IN.md OUT.c\n");
  return 2;
}
