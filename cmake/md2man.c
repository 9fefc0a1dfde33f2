/* docs/cmd/<name>.md as a man page, so that `man vramledger-<name>` and
 * `vramledger <name> --help` are one text (the --help text is the same file,
 * embedded by cmake/embed.cmake). A build tool, not part of vramledger.
 *
 *   md2man VERSION IN.md OUT.1            one command's page
 *   md2man VERSION --index OUT.1 NAME...  vramledger.1: the list of pages
 *
 * The Markdown is the subset docs/cmd/ uses: "# vramledger NAME", "##" and
 * "###" headings, paragraphs, "- " lists, 4-space code blocks, `code`,
 * **bold**, *emphasis*, [text](link). Roff: groff_man(7). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void heading(FILE *o, const char *macro, const char *s) {
  fprintf(o, "%s \"", macro);
  for (; *s; s++)
    fputc(*macro == '.' && macro[2] == 'H' ? toupper((unsigned char)*s) : *s, o);
  fputs("\"\n", o);
}

static void strip_newline(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
    s[--n] = 0;
}

/* The first sentence of the first paragraph: the NAME line's summary. */
static void summary(FILE *in, char *out, size_t n) {
  char line[4096];
  out[0] = 0;
  while (fgets(line, sizeof line, in)) {
    strip_newline(line);
    if (!line[0] && out[0]) break;
    if (!line[0] || line[0] == '#') continue;
    size_t k = strlen(out);
    snprintf(out + k, n - k, "%s%s", k ? " " : "", line);
    char *dot = strstr(out, ". ");
    if (dot) dot[1] = 0;
    k = strlen(out);
    if (k && out[k - 1] == '.') break;
  }
  for (char *p = out; *p; p++)
    if (*p == '`' || *p == '*') memmove(p, p + 1, strlen(p)), p--;
  rewind(in);
}

static int page(const char *version, const char *inp, const char *outp) {
  FILE *in = fopen(inp, "r");
  if (!in) return perror(inp), 1;
  FILE *o = fopen(outp, "w");
  if (!o) return perror(outp), fclose(in), 1;
  char line[4096], name[256] = "", sum[1024];
  summary(in, sum, sizeof sum);
  int pre = 0, list = 0, para = 0, fresh = 1; /* fresh: after a heading */
  while (fgets(line, sizeof line, in)) {
    strip_newline(line);
    if (!name[0] && strncmp(line, "# vramledger ", 13) == 0) {
      snprintf(name, sizeof name, "%.200s", line + 13);
      fputs(".TH VRAMLEDGER-", o);
      for (const char *p = name; *p; p++)
        fputc(toupper((unsigned char)*p), o);
      fprintf(o, " 1 \"\" \"vramledger %s\" \"vramledger manual\"\n", version);
      fputs(".SH NAME\n", o);
      fprintf(o, "vramledger\\-%s \\- ", name);
      inline_text(o, sum);
      fputs(".SH DESCRIPTION\n", o);
      continue;
    }
    int indented = strncmp(line, "    ", 4) == 0;
    if (pre && !indented && line[0]) fputs(".fi\n.RE\n", o), pre = 0;
    if (!line[0]) {
      if (pre) fputc('\n', o);
      list = 0;
      para = 1;
      continue;
    }
    int head = line[0] == '#';
    if (para && !fresh && !head && !pre && !(indented && list)) fputs(".PP\n", o);
    para = 0;
    fresh = head;
    if (indented && !list) {
      if (!pre) fputs(".RS 4\n.nf\n", o), pre = 1;
      fputs("\\&", o);
      for (const char *s = line + 4; *s; s++)
        if (*s == '\\')
          fputs("\\e", o);
        else if (*s == '-')
          fputs("\\-", o);
        else
          fputc(*s, o);
      fputc('\n', o);
    } else if (strncmp(line, "### ", 4) == 0) {
      heading(o, ".SS", line + 4);
    } else if (strncmp(line, "## ", 3) == 0) {
      heading(o, ".SH", line + 3);
    } else if (strncmp(line, "- ", 2) == 0) {
      fputs(".IP \\(bu 2\n", o);
      inline_text(o, line + 2);
      list = 1;
    } else {
      const char *s = line;
      while (*s == ' ')
        s++;
      inline_text(o, s);
    }
  }
  if (pre) fputs(".fi\n.RE\n", o);
  fputs(".SH SEE ALSO\nvramledger(1)\n", o);
  fclose(in);
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
        "hardware, cost and go/no\\-go decisions. Each command has its page, the same text as "
        "\\fBvramledger\\fR \\fIcommand\\fR \\fB\\-\\-help\\fR.\n.SH COMMANDS\n",
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
  if (argc == 4) return page(argv[1], argv[2], argv[3]);
  fprintf(stderr, "usage: md2man VERSION IN.md OUT.1 | md2man VERSION --index OUT.1 NAME...\n");
  return 2;
}
