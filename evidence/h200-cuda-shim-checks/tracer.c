#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdint.h>
typedef long (*fn6)(long,long,long,long,long,long);
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define NMAX 512
static char names[NMAX][96]; static long counts[NMAX]; static int n;
static void note(const char *kind, const char *name){
  char key[96]; snprintf(key,sizeof key,"%s:%s",kind,name);
  pthread_mutex_lock(&mu);
  int i; for(i=0;i<n;i++) if(!strcmp(names[i],key)) break;
  if(i==n && n<NMAX){ strcpy(names[n],key); counts[n]=0; n++; }
  if(i<NMAX) counts[i]++;
  pthread_mutex_unlock(&mu);
}
__attribute__((destructor)) static void dump(void){
  const char *p=getenv("TRACE_OUT"); FILE *f=p?fopen(p,"a"):stderr; if(!f) return;
  fprintf(f,"== pid %d\n",(int)getpid());
  for(int i=0;i<n;i++) fprintf(f,"%ld %s\n",counts[i],names[i]);
  if(f!=stderr) fclose(f);
}
typedef void *(*dlsym_fn)(void*,const char*);
static dlsym_fn real_dlsym_p;
static dlsym_fn real_dlsym(void){
  if(!real_dlsym_p){ real_dlsym_p=(dlsym_fn)dlvsym(RTLD_NEXT,"dlsym","GLIBC_2.34"); if(!real_dlsym_p) real_dlsym_p=(dlsym_fn)dlvsym(RTLD_NEXT,"dlsym","GLIBC_2.2.5"); }
  return real_dlsym_p;
}
void *dlsym(void *h,const char *name){
  if(name && (!strncmp(name,"cu",2))) note("dlsym",name);
  return real_dlsym()(h,name);
}
#define FWD(NAME) long NAME(long a,long b,long c,long d,long e,long f){ static fn6 r; if(!r) r=(fn6)real_dlsym()(RTLD_NEXT,#NAME); note("call",#NAME); return r?r(a,b,c,d,e,f):999; }
FWD(cudaGetDeviceProperties) FWD(cudaGetDeviceProperties_v2) FWD(cudaDeviceGetAttribute)
FWD(cudaGetDriverEntryPoint) FWD(cudaGetDriverEntryPointByVersion)
FWD(cuDeviceGetAttribute) FWD(cuDeviceGetName) FWD(cuDeviceComputeCapability) FWD(cuDeviceGetProperties)
FWD(cudaDeviceGetLimit) FWD(cudaGetDeviceCount) FWD(cudaDriverGetVersion) FWD(cudaRuntimeGetVersion)
/* cuGetProcAddress: log symbol requested */
typedef long (*gpa)(const char*,void**,int,uint64_t,void*);
long cuGetProcAddress_v2(const char *s,void **p,int v,uint64_t fl,void *st){ static gpa r; if(!r) r=(gpa)real_dlsym()(RTLD_NEXT,"cuGetProcAddress_v2"); char k[96]; snprintf(k,sizeof k,"%s@%d/%lu",s?s:"?",v,(unsigned long)fl); note("gpa2",k); return r?r(s,p,v,fl,st):999; }
long cuGetProcAddress(const char *s,void **p,int v,uint64_t fl){ static gpa r; if(!r) r=(gpa)real_dlsym()(RTLD_NEXT,"cuGetProcAddress"); char k[96]; snprintf(k,sizeof k,"%s@%d/%lu",s?s:"?",v,(unsigned long)fl); note("gpa1",k); return r?r(s,p,v,fl,0):999; }
long cudaGetDriverEntryPointX(void){return 0;}
