# The command line's habits (help, versions, logs, tabular output, plan warnings): shell cases
# that run moebench and the scripts as a user would. Label: cli.
foreach(script help logs tables plan)
  add_test(NAME cli.${script}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/${script}.sh $<TARGET_FILE:moebench>
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli.${script} PROPERTIES LABELS cli TIMEOUT 600)
  moe_mpi_test_env(cli.${script})
endforeach()
