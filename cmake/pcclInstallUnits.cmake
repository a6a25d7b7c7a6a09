# pcclInstallUnits.cmake - run by `cmake --install`: writes the systemd units of packaging/systemd/ into
# PCCL_UNIT_DIR, with ExecStart naming the pccl of the prefix being installed to (so --prefix needs no
# reconfigure). Set by the install rule: PCCL_UNIT_SRC (packaging/systemd), PCCL_UNIT_DIR, PCCL_UNIT_BINDIR
# (either relative to the prefix or absolute).
foreach(_var PCCL_UNIT_DIR PCCL_UNIT_BINDIR)
  if(NOT IS_ABSOLUTE "${${_var}}")
    set(${_var} "${CMAKE_INSTALL_PREFIX}/${${_var}}")
  endif()
endforeach()
foreach(_unit pccl-master.service pccl-peer@.service)
  message(STATUS "Installing: $ENV{DESTDIR}${PCCL_UNIT_DIR}/${_unit}")
  configure_file("${PCCL_UNIT_SRC}/${_unit}.in" "$ENV{DESTDIR}${PCCL_UNIT_DIR}/${_unit}" @ONLY)
endforeach()
