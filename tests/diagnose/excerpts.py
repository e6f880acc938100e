"""Log excerpts in the shape CANN, HCCL, torch_npu, torch and npu_runtime print them.

Written for these tests (values, paths, ids and times invented); the layout of each line
(prefixes, error codes, fixed phrases) follows the public reports the signature table
cites. ``EXCERPTS[id]`` holds at least one excerpt for every signature, each of which
must be diagnosed as that signature (and as that signature first).
"""

EXCERPTS: dict[str, list[str]] = {
    "hbm-ecc": [
        "[rank3]: RuntimeError: NPU function error: call aclrtSynchronizeStream failed, error code is 507054\n"
        "[rank3]: [ERROR] 2026-03-02-10:11:12 (PID:4242, Device:3, RankID:3) ERR00100 PTA call acl api failed\n"
        "[rank3]: HBM MULTI BIT ECC ERROR.\n",
        "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
        "RuntimeError: UCE ERROR. The memory of device 5 has an uncorrectable error.\n",
        "[rank1]: RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:400 NPU function error: "
        "UCE ERROR., error code is 507053\n",
        "[ERROR] RUNTIME(812,python):2026-03-02-10:11:12.000.050 [device_error_proc.cc:900]812 ProcessStarsCoreErrorInfo:"
        "The error from device(chipId:2, dieId:0), serial number is 4, hbm multi bit ecc error occurred.\n",
    ],
    "device-link-lost": [
        "[ERROR] RUNTIME(991,python):2026-03-02-10:11:12.000.001 [device_error_proc.cc:77] device 6 heartbeat lost\n",
        "[rank7]: RuntimeError: HCCS LINK ERROR.\n",
        "RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:361 NPU function error: "
        "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(stream()), error code is 507010\n"
        "[Error]: The task scheduler loses the heartbeat. \n",
        "[ERROR] HCCL(7071,python):2026-03-02-10:11:12.000.001 [transport_roce.cc:88] [7071] rdma link down, "
        "peer rank[6]\n",
        # issue 38.8: CANN's runtime on a lost device (shape of vllm-ascend issue 8186), removal and link loss
        "        Device[1] lost heartbeat.[FUNC:SyncTask][FILE:direct_hwts_engine.cc][LINE:407]\n",
        "        rtDeviceSynchronizeWithTimeout execution failed, reason=lost heartbeat[FUNC:FuncErrorReason]\n",
        "[ERROR] DRV(3021,python):2026-03-02-10:11:12.000.001 [devdrv] device 3 has been removed, stop the task\n",
        "kernel: [127576.922378] pcieport 0000:80:00.0: PCIe link lost, davinci2 disconnected\n",
        "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n",
        # the driver (dmesg), the runtime and HCCL on a device that left: other ids and tenses
        ("[ERROR] RUNTIME(1234,python):2026-03-02-10:11:12.000.002 [device.cc:320]1234 Device 3 was lost, "
         "device status abnormal\n"),
        ("[Mon Mar  2 10:11:12 2026] [ascend] [ERROR] [devdrv] [devdrv_heart_beat_check 412] <kworker/3:2:881> "
         "dev_id 3 heartbeat lost\n"),
        "[Mon Mar  2 10:11:13 2026] [ascend] [ERROR] [devdrv] [devdrv_manager_remove 95] device(3) is removed\n",
        "[ 8812.123457] pcieport 0000:80:00.0: pciehp: Slot(2): Card not present\n",
        ("[ERROR] HCCL(7071,python):2026-03-02-10:11:12.000.003 [transport_p2p.cc:150] [7071] the link to rank 5 "
         "was disconnected\n"),
        ("[ERROR] HCCL(7071,python):2026-03-02-10:11:12.000.004 [hccs_link.cc:61] [7071] HCCS link 2 is broken, "
         "local device 0\n"),
    ],
    "remote-rank-failed": [
        "[rank2]:[E302 10:11:12.1 ProcessGroupHCCL.cpp:900] SUSPECT REMOTE ERROR. rank 5 did not answer.\n",
        "[PID: 77] 2026-03-02-10:11:12 grep -rn 'error cqe' found: error cqe status[0x15] on device 1\n",
    ],
    "cann-not-set": [
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    import torch_npu\n"
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory\n",
        "OSError: libascendcl.so: cannot open shared object file: No such file or directory\n",
    ],
    "driver-not-visible": [
        "ImportError: libascend_hal.so: cannot open shared object file: No such file or directory\n",
    ],
    "hccp-busy": [
        "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64\n"
        "[ERROR] 2026-03-02-10:11:12 (PID:927, Device:3, RankID:3) ERR02200 DIST call hccl api failed.\n"
        "EJ0001: 2026-03-02-10:11:12.167.645 Failed to initialize the HCCP process. Reason: Maybe the last "
        "training process is running.\n",
    ],
    "nccl-backend": [
        "  File \"/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py\", line 1500, in _new_process_group_helper\n"
        "    raise RuntimeError(\"Distributed package doesn't have NCCL built in\")\n"
        "RuntimeError: Distributed package doesn't have NCCL built in\n",
    ],
    "version-mismatch": [
        "ImportError: /usr/local/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so: undefined symbol: "
        "_ZN3c1010TensorImpl; torch_npu was built against libtorch 2.5\n",
        "[W302 10:11:12.000 compiler_depend.ts:117] Warning: Driver Version: 23.0.rc2 is invalid or not supported yet.\n",
    ],
    "npu-oom": [
        "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.50 GiB (NPU 0; 60.96 GiB total capacity; "
        "57.10 GiB already allocated; 57.10 GiB current active; 1.01 GiB free; 58.80 GiB reserved in total by PyTorch)\n",
        "RuntimeError: NPU out of memory. Tried to allocate 64.00 MiB (NPU 3; 29.50 GiB total capacity)\n",
    ],
    "aicore-exception": [
        "[E OpParamMaker.cpp:273] call aclnnIndexPut failed, detail:EZ9999: Inner Error!\n"
        "EZ9999: 2026-03-02-10:11:12.000.001  The error from device(chipId:1, dieId:0), serial number is 3, "
        "there is an aicore error exception, core id is 7, error code = 0x800000\n",
        "        Kernel task happen error, retCode=0x26, [aicore exception].[FUNC:PreCheckTaskErr]\n",
        "RuntimeError: ACL stream synchronize failed, error code:507015\n",
        "RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:25 NPU function error: "
        "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035\n",
    ],
    "operator-error": [
        "RuntimeError: index_put_:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:88 NPU function error: call "
        "aclnnIndexPutImpl failed, error code is 161002\n"
        "[ERROR] 2026-03-02-10:11:12 (PID:44, Device:0, RankID:0) ERR01100 OPS call acl api failed\n",
    ],
    "nan-loss": [
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.12}\n",
        '{"event": "nan_loss", "step": 41, "rank": 0, "value": "nan", "threshold": null}\n',
        "epoch 3 step 120 loss=nan lr=0.001\n",
        "step 320 loss nan lr 3.0e-04\n",  # issue 38.8: free text, no colon or equals sign
        "[2026-03-02 10:11:12] epoch 1 | step 88 | loss inf | tokens/s 5120\n",
        "WARNING: Loss is NaN, stopping training\n",
        "step 12 loss tensor(nan, device='npu:0', grad_fn=<NllLossBackward0>)\n",  # print(f"step {i} loss {loss}")
        "Epoch 1: 100%|##########| 50/50 [00:10<00:00, 4.90it/s, v_num=0, train_loss=nan]\n",
        "step 5 | lm_loss -inf | lr 1e-4\n",
        "  exitcode  : 76 (pid: 14692)\n",
    ],
    "force-stop": [
        "[rank2]: RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:467 NPU function error: "
        "FORCE STOP., error code is 107022\n",
    ],
    "watchdog-hang": [
        "npu_runtime watchdog: rank 1: no sign of life for 600 s (timeout 600 s); dumping stacks, "
        "killing 2 child process(es) and exiting with code 75\n",
        "[rank9]:[E909 09:55:29.3 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=20, OpType=ALLREDUCE) ran for 600045 milliseconds before timing out.\n",
    ],
    "rendezvous": [
        "torch.distributed.DistNetworkError: The client socket has timed out after 900000ms while trying to connect "
        "to (node-0, 29500).\n",
        "RuntimeError: [4] is setting up HCCL communicator and retrieving the unique id from [0] via c10d key-value "
        "store by key '0', but store->get('0') got error: Socket Timeout\n",
    ],
    "hccl-connect-timeout": [
        "[rank1]: EI0006: [PID: 555] 2026-03-02-10:11:12.444.436 Getting socket times out. Reason: Remote Rank did "
        "not send the data in time. Please check the reason for the rank being stuck\n",
        "[ERROR] HCCL(555,python3):2026-03-02-10:13:12.177.194 [hccl_socket_manager.cc:778] [556][Wait][LinkEstablish]"
        "wait socket establish timeout, role[1] rank[3] timeout[120]\n",
    ],
    "hccl-exec-timeout": [
        "EI0002: [PID: 2969] 2026-03-02-10:11:12.713.335 The wait execution of the Notify register times out. "
        "Reason: The Notify register has not received the Notify record from remote rank: [5].\n",
        "EI9999: 2026-03-02-10:42:00.358.410  The error from device(chipId:3, dieId:0), serial number is 9, hccl "
        "fftsplus task timeout occurred during task execution, stream_id:5, stuck notify num:1, timeout:1836.\n",
        "EE9999: Inner Error!\nEE9999  fftsplus task execute failed, dev_id=7, stream_id=7, task_id=59, context_id=6, "
        "thread_id=0, err_type=13[hccl fftsplus timeout][FUNC:GetError][FILE:stream.cc][LINE:1512]\n",
    ],
    "worker-exit-hardware": [
        "  exitcode  : 77 (pid: 14692)\n",
    ],
    "worker-exit-fatal": [
        "  exitcode  : 78 (pid: 14692)\n",
    ],
    "worker-failed": [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\ntrain.py FAILED\n"
        "------------------------------------------------------------\nFailures:\n  <NO_OTHER_FAILURES>\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-03-02_13:02:58\n  host      : node-3\n"
        "  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 14692)\n  error_file: <N/A>\n",
    ],
    "cpu-fallback": [
        "[W VariableFallbackKernel.cpp:51] Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' is not "
        "currently supported on the NPU backend and will fall back to run on the CPU. This may have performance "
        "implications. (function npu_cpu_fallback)\n",
    ],
}

# Lines that look alarming but are no failure: none of them may be diagnosed.
HEALTHY = [
    "step 320 loss 2.3104 lr 3.0e-04 grad norm: nan (skipped)\n",  # issue 38.8: the noise around free-text losses
    "step 321 loss scale 65536.0 found inf in gradients, skipping\n",
    "removed checkpoint ckpt/step-20 (keeping 3); symlink lost+found skipped\n",
    "step 320 loss 2.3104 lr 3.0e-04 grad_norm nan\n",
    "config: enable loss nan check: True\n",
    "Best loss: inf (no evaluation yet)\n",  # a best-so-far starts at inf
    "best_loss = inf\n",
    "Validation loss decreased (inf --> 0.693147).  Saving model ...\n",
    "client disconnected from TensorBoard\n",
    "wandb: Network error (ConnectionError), entering retry loop. connection lost\n",
    "Removed device_map from the model config\n",
    "Device 3 is online; link status: UP\n",
    "loss information logged to tb/\n",
    "{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.12}\n",
    "INFO: HCCL_CONNECT_TIMEOUT=1800 HCCL_EXEC_TIMEOUT=1836\n",
    "Using torch SDPA for faster training and inference.\n",
    "epoch 3 step 120 loss=0.0123 lr=0.001 (nan_count=0)\n",
    "npu_runtime: checkpoint step 40 saved to ckpt/step-40\n",
    "[INFO] memory: 57.10 GiB allocated of 60.96 GiB\n",
    "The device is ready: 8 NPUs found\n",
    "npu_runtime preflight: HBM multi-bit ECC errors: 0\n",
    "HBM Multi Bit ECC Error Count : 0\n",
    " iteration       11/    5000 | lm loss: 8.9E+00 | loss scale: 32768.0 | grad norm: nan | number of skipped "
    "iterations:   1 | number of nan iterations:   0 |\n",
    "RuntimeError: Invalid device ID. device 9 not found; ASCEND_RT_VISIBLE_DEVICES=0,1\n",
    "/usr/local/lib/python3.10/site-packages/torch_npu/distributed/distributed_c10d.py:93: UserWarning: HCCL "
    "doesn't support gather at the moment. Implemented with allgather instead.\n",
]
