/* The cis2 CLI entry point; commands live in cli.c. */
int cis2_cli_main(int argc, char **argv);
int main(int argc, char **argv) { return cis2_cli_main(argc, argv); }
