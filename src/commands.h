/* One entry per subcommand: src/cmd_<name>.c exports cmd_<name>. */
#ifndef VRAMLEDGER_COMMANDS_H
#define VRAMLEDGER_COMMANDS_H

int cmd_estimate(int argc, const char **argv);
int cmd_validate(int argc, const char **argv);
int cmd_run(int argc, const char **argv);
int cmd_report(int argc, const char **argv);
int cmd_doctor(int argc, const char **argv);
int cmd_trace(int argc, const char **argv);
int cmd_watch(int argc, const char **argv);
int cmd_commit(int argc, const char **argv);
int cmd_check(int argc, const char **argv);
int cmd_audit(int argc, const char **argv);
int cmd_plan(int argc, const char **argv);
int cmd_fit(int argc, const char **argv);
int cmd_sensitivity(int argc, const char **argv);
int cmd_sweep(int argc, const char **argv);

extern const char vl_help_estimate[];
extern const char vl_help_validate[];
extern const char vl_help_run[];
extern const char vl_help_report[];
extern const char vl_help_doctor[];
extern const char vl_help_trace[];
extern const char vl_help_watch[];
extern const char vl_help_commit[];
extern const char vl_help_check[];
extern const char vl_help_audit[];
extern const char vl_help_plan[];
extern const char vl_help_fit[];
extern const char vl_help_sensitivity[];
extern const char vl_help_sweep[];

#endif
